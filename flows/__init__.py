"""Work that runs as Prefect flows (indexing, file operations) and the plain functions behind them."""
