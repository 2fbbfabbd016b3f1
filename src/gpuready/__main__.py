from gpuready.cli import main

raise SystemExit(main())
