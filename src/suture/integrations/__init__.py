"""suture inside LangChain, LlamaIndex and Haystack (see docs/integrations.md).

Each framework has one module, imported only when asked for (its framework is an extra):

* `suture.integrations.langchain`: `SutureRetriever`, `ScarCompressor`
  (extra ``suture[langchain]``);
* `suture.integrations.llamaindex`: `SutureRetriever`, `ScarPostprocessor`
  (extra ``suture[llamaindex]``);
* `suture.integrations.haystack`: `SutureRetriever`, `ScarExpander`
  (extra ``suture[haystack]``).

The adapters are thin: `source.py` says where a context comes from (an `Index` or a
`suture serve` client) and how a span becomes framework metadata; `framework_store.py`
lets SCAR run over chunks a framework already stored, through the `Store` contract, so
no policy is implemented twice.
"""
