"""The TriageReport model and its renderings."""
