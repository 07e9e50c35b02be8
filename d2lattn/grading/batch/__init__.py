"""Grading a class: the submissions found and named, each notebook graded in its sandboxes,
scored, its feedback written, and the grades kept in a gradebook with its exports."""
