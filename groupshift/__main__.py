from groupshift.cli import main

raise SystemExit(main())
