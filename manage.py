#!/usr/bin/env python
"""Django's command-line utility for haptic."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")
    from django.core.management import ManagementUtility

    from config.env import SETTINGS, settings_help

    class Utility(ManagementUtility):
        """Django's, with the settings the site reads at the end of `manage.py --help`."""

        def main_help_text(self, commands_only: bool = False) -> str:
            text = super().main_help_text(commands_only)
            return text if commands_only else f"{text}\n\n{settings_help(table=SETTINGS)}\n"

    Utility(sys.argv).execute()


if __name__ == "__main__":
    main()
