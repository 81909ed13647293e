import sys

# kio's phantom types register a hypothesis strategy for each of them when hypothesis can be
# imported (it is a test extra): importing hypothesis and registering them is half a second of
# every `python -m groupshift` start, and e2e starts hundreds of servers and tools. A command
# draws no strategies; `None` in sys.modules makes the import fail, which kio handles (it treats
# hypothesis as absent). Only this entry point does it: an in-process `main()` (the tests) keeps
# whatever the caller has imported.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from groupshift.cli import main  # noqa: E402

raise SystemExit(main())
