"""`python -m mcp_server.cli`: the `assay` command."""

import sys

from mcp_server.cli import main

sys.exit(main())
