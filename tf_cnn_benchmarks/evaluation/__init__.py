"""Evaluation: the evaluation graph and loop, its schedules during training
and time to accuracy."""
