"""Layer 5, commands: one thin module per command (argparse, then calls into the layers below), each
with main(argv=None) -> int. Nothing imports a command but __main__ and the scripts."""
