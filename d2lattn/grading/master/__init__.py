"""The master format and the case records: notebooks and their markers, test cases (parse,
judge, report), a case as data for the sandbox, plain values compared."""
