"""`make bench`: the service against its in-process limit, side by side, in one run."""
