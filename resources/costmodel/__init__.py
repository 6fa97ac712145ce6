"""The shipped trained cost models (default.json names the default), their training set and split."""
