"""Files ablate reads and writes whole: the atomic writer, the one JSON and YAML readers, W&B offline run files."""
