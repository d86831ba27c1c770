import sys

from albert_tf.cli import main

sys.exit(main())
