"""Document generation, in one place: everything that writes or checks a committed document.

* :mod:`~initlab.app.docgen.cli_docs` -- the README's command table and ``docs/commands.md`` from the CLI's parsers,
  and :func:`~initlab.app.docgen.cli_docs.parse_documented` (a documented command parsed by its real parser);
* :mod:`~initlab.app.docgen.doc_examples` -- every command and module name the README and docs pages show;
* :mod:`~initlab.app.docgen.claims` -- the README's claims table from ``docs/results``; its rows are each
  experiment's ``CLAIM_ROWS``, beside their verdict functions in its ``claims`` module;
* :mod:`~initlab.app.docgen.tables` -- the result tables of a reproduce folder (``docs/generated/``);
* :mod:`~initlab.app.docgen.theory_doc` -- ``docs/theory.md`` from the statement registry;
* :mod:`~initlab.app.docgen.mlmhead_doc` -- ``docs/mlmhead.md``'s ``inspect``/``rescale`` example;
* :mod:`~initlab.app.docgen.prediction_check` -- the model check of ``inspect``'s predicted active dims;
* :mod:`~initlab.app.docgen.architecture` -- the layer list of the import rule and ``docs/architecture.md`` from it;
* :mod:`~initlab.app.docgen.template` -- the ``--docs``/``--template`` command line those two pages share.

Every module here only reads saved files or runs library code; nothing below the roof imports it.
"""
