"""``method="vanilla"``: keep every token. The unpruned baseline run through the same code path
(same hooks, same meters), so its efficiency figures are measured exactly like the methods'.
No paper, no official code, one variant (``paper``)."""
