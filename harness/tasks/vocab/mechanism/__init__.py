"""Split vocabulary: the embedder, its private rows for contested pairs, the index that picks them."""
