"""One module per CLI group; every argparse ``main()`` of initlab lives here."""
