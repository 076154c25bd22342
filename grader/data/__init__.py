"""The grader's own data for the training and evaluation checks: Track A reversal rows, the Track B corpus, the
cyclic-pattern mechanics task. Everything is generated from the judge's seeds or shipped with the package."""
