"""A task module whose import calls sys.exit: the job must fail, not the worker."""

import sys

sys.exit(3)
