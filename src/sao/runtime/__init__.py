"""The asynchronous runtime: scheduler, trajectory queue, weight channel, local and Ray backends."""
