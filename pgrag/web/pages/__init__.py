"""Console routes by page: sign-in, overview, search playground, documents."""
