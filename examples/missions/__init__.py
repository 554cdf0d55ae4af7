"""The missions example: the four listeners of SPEC section 10 and the workflows they start."""
