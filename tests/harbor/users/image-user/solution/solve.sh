#!/bin/bash
# Harbor runs the oracle as the image's user when [agent].user is not set.
id -un > /logs/agent/whoami.txt
