"""The shipped guided lessons (issue 18 item 4): one JSON file each, read by engine/teaching/lessons.py."""
