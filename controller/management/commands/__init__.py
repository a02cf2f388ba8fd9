"""`python manage.py localcluster|fleet|checkpoints|intent|request_review`."""
