from recnotebooks.cli import main

raise SystemExit(main())
