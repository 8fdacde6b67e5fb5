#!/bin/bash
# Nothing to do but read the tool's log.
cat /var/log/tool/tool.log
