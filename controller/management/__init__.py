"""Operator commands of the controller app (python manage.py ...)."""
