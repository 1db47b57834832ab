"""Small pure helpers the whole library shares: byte and number formatting (units), the blank-text
rule (blank), readable byte-level tokens (utf8) and reading user JSON with one-line errors (jsonio)."""
