"""Foundation shared by every stage: config, ledger, layout, stage records, errors, atomic writes. Imports no stage."""
