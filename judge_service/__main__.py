import sys

from judge_service.cli.main import main

sys.exit(main())
