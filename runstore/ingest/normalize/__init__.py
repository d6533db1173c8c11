"""Normalizers: one module per artifact, turning a source file's records into table rows.

`base.py` states the contract every normalizer implements (`Normalizer`, `Batch`, `Output`)
and the rules they share; `registry.py` is the one tuple mapping each file kind to its
normalizer and the tables it writes. One module per artifact: `config`, `code_diff`,
`metrics`, `checkpoints`, `timing`, `trace`, `rollouts`, `logtree`.
"""
