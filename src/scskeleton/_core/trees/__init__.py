"""Principal trees and graphs over node sets: soft assignment, DDRTree, RPG, projection onto edges, pseudotime, pruning, gaps, bootstrap support."""
