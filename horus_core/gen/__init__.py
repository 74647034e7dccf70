"""Generated from proto/ by scripts/gen_proto.py. Do not edit."""
