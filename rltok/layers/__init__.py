"""The operations every network and boundary method is built from: transformer blocks and attention,
the chunking of bytes into chunks and back, and the key/value caches of incremental decoding."""
