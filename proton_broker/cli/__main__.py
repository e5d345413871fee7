"""``python -m proton_broker.cli``: the same as the ``proton-broker-config`` console script."""

import sys

from proton_broker.cli.config import main

sys.exit(main())
