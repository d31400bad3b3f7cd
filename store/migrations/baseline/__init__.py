"""Revision 0001's parts: the frozen tables (:mod:`.tables`), triggers and retired objects (:mod:`.triggers`), and
the adoption of a store made before migrations (:mod:`.adopt`)."""
