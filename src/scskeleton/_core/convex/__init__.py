"""Convex embedding: losses, regularizers and the regularized kernel solver."""
