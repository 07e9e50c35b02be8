"""Forbidden names: the package's call graph read from source, the scan of a student's cells,
and the copy of d2lattn each group of questions runs with (forbidden objects stubbed)."""
