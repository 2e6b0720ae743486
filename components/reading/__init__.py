"""Every file a user hands the stack, read with bounds: `bounded` (one reader; its errors say what and how to fix)."""
