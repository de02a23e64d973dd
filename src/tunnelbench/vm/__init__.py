"""Labs on other kernels: kernels fetched into a cache, VM guests booted on them."""
