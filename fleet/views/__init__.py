"""What people and agents look at: the radar, the queue, repo listings, digests."""
