"""Campaign schedulers: turn a campaign's share of a cluster into concrete jobs."""
