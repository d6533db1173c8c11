"""Tolerant readers of source files: bytes in, decoded records out, bad lines reported.

`jsonl` reads JSON-lines from a byte offset up to the last complete newline; `read_slice`
gives the bytes of a file between two offsets without ever writing to the source.
"""
