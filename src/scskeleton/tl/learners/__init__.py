"""Learners: each fits a skeleton (a tree, a graph or an embedding) to the cells and writes it under its key."""
