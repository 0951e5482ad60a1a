"""coursekit: the machinery that publishes and grades the course, used from a checkout.

It is not part of the package a learner installs (``pip install`` of the repository installs
``course_lib`` only):

    release     editions of the book and the nbgrader course directory
                (python -m coursekit.release student OUTDIR)
    grading     the reference solutions, the data the checks compare with, hidden tests, and
                the assignments' nbgrader round trip (python -m coursekit.grading --help)
"""
