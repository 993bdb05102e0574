"""The analysis steps, one module each beside the pure logic it drives; `registry` holds their run order,
the function that runs each and what each one writes. Imports nothing, so loading one step does not load
every step."""
