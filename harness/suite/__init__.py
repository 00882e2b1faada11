"""The suite file: its schema, its loading and validation, and its sweep points."""
