#!/bin/bash
printf 'alpha\nbeta\ngamma\ndelta\n' > facts.txt
