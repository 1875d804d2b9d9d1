"""Gene tools: trends along paths, branch and fork tests, association, activation and trend modules."""
