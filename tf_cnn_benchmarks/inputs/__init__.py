"""The input pipeline: synthetic inputs, record readers, preprocessing and the
checks that name a bad input file."""
